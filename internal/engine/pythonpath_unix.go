//go:build !windows

package engine

// defaultPythonName is the interpreter looked up on PATH when none is named.
const defaultPythonName = "python3"
