package waitroom

// QuietDue is quietDue, for the Admitter's tests to know when a quiet
// room is recorded.
var QuietDue = quietDue
