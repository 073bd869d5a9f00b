package porcupine

import (
	"context"
	"time"
)

// CheckOperations checks whether a history is linearizable.
func CheckOperations(model Model, history []Operation) bool {
	res, _ := checkOperations(context.Background(), model, history, false, 0)
	return res == Ok
}

// CheckOperationsTimeout checks whether a history is linearizable, with a
// timeout.
//
// A timeout of 0 is interpreted as an unlimited timeout.
func CheckOperationsTimeout(model Model, history []Operation, timeout time.Duration) CheckResult {
	res, _ := checkOperations(context.Background(), model, history, false, timeout)
	return res
}

// CheckOperationsVerbose checks whether a history is linearizable while
// computing data that can be used to visualize the history and linearization.
//
// The returned LinearizationInfo can be used with [Visualize].
func CheckOperationsVerbose(model Model, history []Operation, timeout time.Duration) (CheckResult, LinearizationInfo) {
	return checkOperations(context.Background(), model, history, true, timeout)
}

// CheckOperationsContext is CheckOperationsTimeout that also gives up, with Unknown, when
// ctx is done; verbose is CheckOperationsVerbose's.
func CheckOperationsContext(ctx context.Context, model Model, history []Operation, verbose bool, timeout time.Duration) (CheckResult, LinearizationInfo) {
	return checkOperations(ctx, model, history, verbose, timeout)
}

// CheckEvents checks whether a history is linearizable.
func CheckEvents(model Model, history []Event) bool {
	res, _ := checkEvents(context.Background(), model, history, false, 0)
	return res == Ok
}

// CheckEventsTimeout checks whether a history is linearizable, with a timeout.
//
// A timeout of 0 is interpreted as an unlimited timeout.
func CheckEventsTimeout(model Model, history []Event, timeout time.Duration) CheckResult {
	res, _ := checkEvents(context.Background(), model, history, false, timeout)
	return res
}

// CheckEventsVerbose checks whether a history is linearizable while computing
// data that can be used to visualize the history and linearization.
//
// The returned LinearizationInfo can be used with [Visualize].
func CheckEventsVerbose(model Model, history []Event, timeout time.Duration) (CheckResult, LinearizationInfo) {
	return checkEvents(context.Background(), model, history, true, timeout)
}
