package engine

import "github.com/pyexec/pyexec/internal/workspace"

// tmpRights: runs execute as the server on Windows.
func tmpRights(string) workspace.Rights { return workspace.ServerRights }
