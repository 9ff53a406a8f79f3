// Package seedcompat holds no code, only the test that runs every usage
// example of the three seed READMEs (../../../shared/seeds) against pyexec
// through a real MCP client: in memory, and against `pyexec mcp --toolsets
// all` as a subprocess. It lives apart from internal/mcpserver because its
// test binary doubles as the pyexec CLI (see TestMain), which mcpserver's
// own tests cannot import.
package seedcompat
