// wordcount-go: counts the words in a notebook's cells through the granted `read-cells` host
// function; also a resource (how it counts) and a prompt (trim a notebook to N words).
package main

import (
	"strings"

	"wit_component/jmcp"
)

type counted struct {
	ID    string `json:"id"`
	Words int    `json:"words"`
}

func wordCount(args map[string]any) (jmcp.ToolResult, error) {
	notebook, _ := args["notebook"].(string)
	kind, _ := args["kind"].(string)
	wanted := map[string]uint8{"code": jmcp.Code, "markdown": jmcp.Markdown}
	if _, known := wanted[kind]; !known && kind != "" && kind != "all" {
		return jmcp.ToolResult{}, jmcp.InvalidArguments("kind must be 'code', 'markdown' or 'all', not '%s'", kind)
	}
	cells, err := jmcp.ReadCells(notebook)
	if err != nil {
		return jmcp.ToolResult{}, err // e.g. not-granted: the message names the grant
	}
	words, perCell := 0, []counted{}
	for _, cell := range cells {
		if want, only := wanted[kind]; only && cell.Kind != want {
			continue
		}
		n := len(strings.Fields(cell.Source))
		words += n
		perCell = append(perCell, counted{cell.Id, n})
	}
	result := jmcp.Text("%d words in %d cells", words, len(perCell))
	return jmcp.Structured(result, map[string]any{"cells": perCell, "words": words}), nil
}

func init() {
	jmcp.Register(jmcp.Extension{
		Name:    "wordcount-go",
		Version: "0.1.0",
		Tools: []jmcp.Tool{{
			Name:        "word_count",
			Description: `Counts the words in the cells of a notebook ("" or no notebook: the current one).`,
			InputSchema: `{"type": "object", "properties": {"notebook": {"type": "string"},
				"kind": {"type": "string", "enum": ["all", "code", "markdown"]}}}`,
			ReadOnly: jmcp.Yes,
			Call:     wordCount,
		}},
		Resources: []jmcp.Resource{{
			URI: "wordcount-go://rules", Name: "wordcount-go-rules", MimeType: "text/plain",
			Description: "How word_count counts.",
			Read: func(uri string) ([]jmcp.ResourceContents, error) {
				return []jmcp.ResourceContents{jmcp.ResourceText(uri, "text/plain",
					"A word is a run of characters between whitespace, in the cell's source.")}, nil
			},
		}},
		Prompts: []jmcp.Prompt{{
			Name:        "trim_to_words",
			Description: "Asks to shorten the notebook to a number of words.",
			Arguments:   []jmcp.PromptArgument{{Name: "limit", Description: "The most words to keep.", Required: true}},
			Get: func(args map[string]string) (jmcp.PromptResult, error) {
				limit, ok := args["limit"]
				if !ok {
					return jmcp.PromptResult{}, jmcp.InvalidArguments("the prompt needs 'limit', a number of words")
				}
				return jmcp.UserText("Call word_count on this notebook, then shorten its markdown cells "+
					"until the notebook has at most %s words.", limit), nil
			},
		}},
	})
}
