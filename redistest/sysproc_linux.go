package redistest

import "syscall"

// sysProcAttr puts a server in its own process group, so a signal to the
// group reaches everything it forked, and has the kernel SIGKILL it if the
// test binary dies (a timeout panic, a Ctrl-C) before t.Cleanup runs.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
