package uvenv

import (
	"context"
	"errors"
	"os/exec"
)

// directConfiner runs a build's commands as plain subprocesses, with the
// environment and directory the build gives. The sandbox around them is
// the engine's (its tests prove the confinement); here it is the build
// logic that is tested: which commands run, where, and what comes out.
func directConfiner(ctx context.Context, c Command) (int, error) {
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = c.Env, c.Dir, c.Stdout, c.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}
