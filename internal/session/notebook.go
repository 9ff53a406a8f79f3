package session

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Notebook writes a session's history as a Jupyter notebook (nbformat
// 4.5): one code cell per cell run, with its stdout and stderr as stream
// outputs, its result as an execute_result (text/plain) and its exception
// as an error output. Rich outputs (images, HTML) are not captured yet, so
// none are written.
func Notebook(h History, python string) ([]byte, error) {
	type output map[string]any
	cells := make([]map[string]any, 0, len(h.Cells))
	for _, c := range h.Cells {
		outs := []output{}
		if c.Stdout != "" {
			outs = append(outs, output{"output_type": "stream", "name": "stdout", "text": lines(c.Stdout)})
		}
		if c.Stderr != "" {
			outs = append(outs, output{"output_type": "stream", "name": "stderr", "text": lines(c.Stderr)})
		}
		if c.Result != nil {
			outs = append(outs, output{"output_type": "execute_result", "execution_count": c.ExecutionCount,
				"data": map[string]any{"text/plain": lines(*c.Result)}, "metadata": map[string]any{}})
		}
		if c.Error != nil {
			tb := strings.Split(strings.TrimRight(c.Error.Traceback, "\n"), "\n")
			outs = append(outs, output{"output_type": "error", "ename": c.Error.Ename, "evalue": c.Error.Evalue, "traceback": tb})
		}
		cells = append(cells, map[string]any{
			"cell_type": "code", "id": fmt.Sprintf("cell-%d", c.ExecutionCount), "execution_count": c.ExecutionCount,
			"metadata": map[string]any{}, "source": lines(c.Code), "outputs": outs,
		})
	}
	nb := map[string]any{
		"nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{
			"kernelspec":    map[string]any{"name": "python3", "display_name": "Python 3", "language": "python"},
			"language_info": map[string]any{"name": "python", "version": python},
			"pyexec":        map[string]any{"session": h.Session, "cells_dropped": h.Dropped},
		},
		"cells": cells,
	}
	return json.MarshalIndent(nb, "", " ")
}

// lines splits text the way notebooks store it: a list of lines, each but
// the last ending in a newline.
func lines(s string) []string {
	if s == "" {
		return []string{}
	}
	out := strings.SplitAfter(s, "\n")
	if out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}
