package waitroom

// QuietPhase is quietPhase, for the Admitter's tests to know when a quiet
// room is recorded.
var QuietPhase = quietPhase
