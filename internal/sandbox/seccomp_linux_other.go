//go:build linux && !amd64

package sandbox

// legacyModeRules: architectures other than x86_64 have only the *at forms
// of chmod, open, mkdir and mknod.
var legacyModeRules []modeRule
