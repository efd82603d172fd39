// Package uplot embeds uPlot, the chart library of the operator's
// dashboard and of the load test's HTML report, unchanged from its npm
// package (see README.md), with its MIT license.
package uplot

import _ "embed" // the files below

// Version is the uPlot release embedded.
const Version = "1.6.32"

var (
	// JS is dist/uPlot.iife.min.js: it defines the global uPlot.
	//go:embed uPlot.iife.min.js
	JS string
	// CSS is dist/uPlot.min.css.
	//go:embed uPlot.min.css
	CSS string
	// License is uPlot's license, to serve or print beside it.
	//go:embed LICENSE
	License string
)
