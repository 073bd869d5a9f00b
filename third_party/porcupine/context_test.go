package porcupine

import (
	"context"
	"testing"
)

// A search whose context is done gives no verdict: Unknown, never the Illegal its stopped
// search would answer, and never Ok, whether the history is legal or not.
func TestDoneContextGivesUnknown(t *testing.T) {
	legal := []Operation{
		{ClientId: 0, Input: registerInput{false, 100}, Call: 0, Output: 0, Return: 100},
		{ClientId: 1, Input: registerInput{true, 0}, Call: 25, Output: 100, Return: 75},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 50; i++ { // the stopped search and the done context race to be seen first
		for _, verbose := range []bool{false, true} {
			if res, _ := CheckOperationsContext(ctx, registerModel, legal, verbose, 0); res != Unknown {
				t.Fatalf("verbose %v: %v, want Unknown", verbose, res)
			}
		}
	}
	if res, _ := CheckOperationsContext(context.Background(), registerModel, legal, false, 0); res != Ok {
		t.Fatalf("with a live context: %v, want Ok", res)
	}
}
