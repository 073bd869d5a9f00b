// Package harness runs one test end to end: it turns a Spec into containers, a storage
// service, worker processes and a nemesis, records everything they do into the history,
// heals and tears everything down, and hands the history to the checkers.
//
// Data flows one way: Spec -> cluster -> storage -> workers + nemesis -> history ->
// checkers -> results. Nothing downstream reaches back: the checkers see only the history,
// so analysis.File gives the same verdicts on a saved run as the run itself did.
package harness
