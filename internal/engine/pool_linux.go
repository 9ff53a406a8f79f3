package engine

// WarmUnsupported is empty where warm interpreters work (see pool.go).
const WarmUnsupported = ""
