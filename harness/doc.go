// Package harness runs one test end to end: it turns a Spec into containers, a storage
// service, worker processes and a nemesis, records everything they do into the history,
// heals and tears everything down, and hands the history to the checkers.
//
// A spec is checked against what exists here once, by CheckSpec, before anything starts:
// its system file registered, its system, client and nemeses looked up and held to one
// another, its defaults filled in. A run starts from what it returns (Checked); package
// spec itself is data and links none of them.
//
// Data flows one way: Spec -> cluster -> storage -> workers + nemesis -> history ->
// checkers -> results. Nothing downstream reaches back: the checkers see only the history,
// so analysis.File gives the same verdicts on a saved run as the run itself did.
package harness
