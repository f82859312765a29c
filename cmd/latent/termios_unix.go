//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// noEcho turns the terminal's echo off while an answer streams, so that keys
// typed meanwhile do not land in the answer; they wait, unechoed, for the
// next prompt. Ctrl-C still raises SIGINT. restore puts the echo back.
func noEcho(fd int) (restore func()) {
	t, err := unix.IoctlGetTermios(fd, getTermios)
	if err != nil {
		return func() {}
	}
	quiet := *t
	quiet.Lflag &^= unix.ECHO
	if unix.IoctlSetTermios(fd, setTermios, &quiet) != nil {
		return func() {}
	}
	return func() { _ = unix.IoctlSetTermios(fd, setTermios, t) } // the terminal as it was; nothing to do if that fails
}

// resizes delivers the terminal's size changes (SIGWINCH) until stop.
func resizes() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, unix.SIGWINCH)
	return ch, func() { signal.Stop(ch) }
}
