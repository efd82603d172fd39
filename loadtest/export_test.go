package loadtest

// Charts lets the tests read the HTML report's data back into the type
// that wrote it.
type Charts = charts
