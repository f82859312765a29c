//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import "os"

// noEcho leaves the terminal as it is where termios is not available.
func noEcho(fd int) (restore func()) { return func() {} }

// resizes delivers nothing where there is no SIGWINCH.
func resizes() (<-chan os.Signal, func()) { return nil, func() {} }
