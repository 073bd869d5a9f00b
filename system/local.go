package system

func init() {
	register(System{
		Name:          "local",
		About:         "a lease lock served by the harness itself: no Docker needed",
		Sizes:         Sizes{Default: 1, Min: 1, Max: 1},
		DefaultClient: "local",
		InProcess:     &InProcess{},
	})
	register(System{
		Name:          "local-broken",
		About:         "the same lease lock, broken on purpose: it grants a lock that is held",
		Sizes:         Sizes{Default: 1, Min: 1, Max: 1},
		DefaultClient: "local-broken",
		InProcess:     &InProcess{Broken: true},
	})
}
