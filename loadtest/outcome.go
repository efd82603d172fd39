package loadtest

import (
	"encoding/json"
	"io"
)

// Outcome is a run's report with the server-side figures next to it: what
// 'waitroom loadtest' prints.
type Outcome struct {
	*Report
	Server ServerFigures `json:"server"`
}

// NewOutcome pairs rep with figs, after checking the server-side
// invariants they break (figs.Violations).
func NewOutcome(rep *Report, figs ServerFigures) Outcome {
	figs.Check(rep)
	return Outcome{rep, figs}
}

// WriteJSON writes the outcome as one indented JSON object: the report's
// fields and "server".
func (o Outcome) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(o)
}

// WriteText writes the report's text and the server's figures after it.
func (o Outcome) WriteText(w io.Writer) error {
	if err := o.Report.WriteText(w); err != nil {
		return err
	}
	o.Server.WriteText(w)
	return nil
}
