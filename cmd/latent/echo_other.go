//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

// noEcho leaves the terminal as it is where termios is not available.
func noEcho(fd int) (restore func()) { return func() {} }
