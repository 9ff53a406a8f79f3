package engine

// defaultPythonName is the interpreter looked up on PATH when none is
// named: the python.org installer and the Microsoft Store both provide
// python.exe (python3.exe only as a Store alias).
const defaultPythonName = "python"
