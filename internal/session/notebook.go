package session

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pyexec/pyexec/internal/engine"
)

// Notebook writes a session's history as a Jupyter notebook (nbformat
// 4.5): one code cell per cell run, with its stdout and stderr as stream
// outputs, what it displayed as display_data outputs (figures as
// image/png, DataFrames as text/html, ... with their whole MIME bundles),
// its value as an execute_result (its rich bundle when it had one) and its
// exception as an error output. The history does not keep how the streams
// and the displays interleaved: streams come first.
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
		result := false
		for _, d := range c.Display {
			data, meta := bundle(d)
			if d.Source == "result" {
				result = true
				outs = append(outs, output{"output_type": "execute_result", "execution_count": c.ExecutionCount, "data": data, "metadata": meta})
			} else {
				outs = append(outs, output{"output_type": "display_data", "data": data, "metadata": meta})
			}
		}
		if c.Result != nil && !result {
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

// bundle is a display's MIME bundle as nbformat stores it: text as lists
// of lines, images as base64 (as the display holds them), JSON as an
// object; an image's size goes in the metadata.
func bundle(d engine.Display) (map[string]any, map[string]any) {
	data := map[string]any{}
	meta := map[string]any{}
	for mime, v := range d.Data {
		switch {
		case isImage(mime):
			data[mime] = v
			if d.Width > 0 && d.Height > 0 {
				meta[mime] = map[string]any{"width": d.Width, "height": d.Height}
			}
		case mime == "application/json" || strings.HasSuffix(mime, "+json"):
			var obj map[string]any // nbformat takes only an object here
			if json.Unmarshal([]byte(v), &obj) == nil && obj != nil {
				data[mime] = obj
			} else if _, ok := d.Data["text/plain"]; !ok {
				data["text/plain"] = lines(v)
			}
		default:
			data[mime] = lines(v)
		}
	}
	if _, ok := data["text/plain"]; !ok {
		data["text/plain"] = []string{}
	}
	return data, meta
}
