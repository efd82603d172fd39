package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/waitroom/waitroom/instance"
)

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseServe(args, getenv)
	if err != nil {
		return finish("serve", err, printServeUsage, flagsHint, stdout, stderr)
	}
	m := &instance.Instance{Config: cfg, Logger: newLogger(cfg, stderr)}
	if err := m.Run(ctx); err != nil {
		m.Logger.Error("start failed", "err", err)
		_ = m.Close()
		return exitFailure
	}
	code := exitOK
	select {
	case <-ctx.Done():
		m.Logger.Info("shutting down")
	case err := <-m.ServeErr():
		m.Logger.Error("serving failed", "err", err)
		code = exitFailure
	}
	if err := m.Close(); err != nil {
		m.Logger.Error("shutdown failed", "err", err)
		code = exitFailure
	}
	return code
}

func newLogger(cfg instance.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
