//go:build unix

package httpapi

import "syscall"

// noFollow makes opening a token file fail on a symlink (ELOOP).
const noFollow = syscall.O_NOFOLLOW
