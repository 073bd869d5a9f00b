package async

import (
	"errors"
	"testing"
)

func TestWaitWaitsForTheFunction(t *testing.T) {
	ran := false
	Go(func() { ran = true }).Wait()
	if !ran {
		t.Error("Wait returned before the function ran")
	}
}

// A panic in the task's goroutine is the waiter's, with its value, at every Wait.
func TestWaitPanicsWithWhatTheFunctionPanickedWith(t *testing.T) {
	bug := errors.New("bug")
	task := Go(func() { panic(bug) })
	for range 2 {
		func() {
			defer func() {
				if p := recover(); p != bug {
					t.Errorf("Wait panicked with %v, want %v", p, bug)
				}
			}()
			task.Wait()
		}()
	}
}
