//go:build unix && !linux

package redistest

import "syscall"

// sysProcAttr puts a server in its own process group, so a signal to the
// group reaches everything it forked. Without Linux's Pdeathsig a server
// outlives a test binary that dies before t.Cleanup runs.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
