// Command lockbreaker breaks distributed locks on purpose and checks which ones keep data
// safe. It is lockbreaker.Main and nothing else, so a binary a user builds around their
// own lock with lockbreaker.Main behaves exactly like this one. The commands and their
// flags live in package cli. See README.md; `lockbreaker help` lists them.
//
// Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad arguments or input, 255 harness error.
package main

import "github.com/lockbreaker/lockbreaker"

func main() { lockbreaker.Main() }
