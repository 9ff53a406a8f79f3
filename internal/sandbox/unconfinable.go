package sandbox

import (
	"errors"
	"fmt"
)

// ErrUnconfinable is why a confining policy is refused off Linux.
var ErrUnconfinable = errors.New("confinement needs Linux")

// unenforceable explains what a platform without the Linux mechanisms
// (goos) cannot enforce of spec, or returns nil when spec asks for none of
// it. It lives outside the !linux files so Linux CI tests its wording.
func unenforceable(spec Spec, goos string) error {
	var what []string
	if spec.Policy != PolicyNone && spec.Policy != "" {
		what = append(what, fmt.Sprintf("sandbox policy %q (Landlock, namespaces, seccomp)", spec.Policy))
	}
	if spec.EffectiveNetwork() == NetworkDeny {
		what = append(what, "network deny (a network namespace)")
	}
	if len(what) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s cannot be enforced on %s. Start pyexec with --sandbox none to run without confinement (the code runs with your user's rights, only the timeout and tree kill apply), or run pyexec in its container image, where the Linux sandbox works",
		ErrUnconfinable, joinAnd(what), goos)
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := s[0]
	for _, x := range s[1 : len(s)-1] {
		out += ", " + x
	}
	return out + " and " + s[len(s)-1]
}
