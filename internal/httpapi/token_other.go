//go:build !unix

package httpapi

// noFollow is 0 where open has no O_NOFOLLOW (Windows): a token file's
// mode bits mean little there, and symlinks need privileges to create.
const noFollow = 0
