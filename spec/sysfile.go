package spec

import (
	"github.com/lockbreaker/lockbreaker/internal/quote"
	"github.com/lockbreaker/lockbreaker/sysfile"
	"github.com/lockbreaker/lockbreaker/system"
)

// loadSystemFile reads SystemFile, when set, registers its system and makes it the spec's:
// System becomes its name (a --system that names another is refused) and
// SystemFileSHA256 its hash. A saved spec whose file has changed since is refused, so a
// rerun tests what the run tested or says why not.
func (s *Spec) loadSystemFile() error {
	if s.SystemFile == "" {
		if s.SystemFileSHA256 != "" {
			return errorf("system_file_sha256 without system_file")
		}
		return nil
	}
	l, err := sysfile.Load(s.SystemFile)
	if err != nil {
		return &Error{Reason: quote.ShortenAll(err.Error())}
	}
	switch {
	case s.System != "" && s.System != l.System.Name && system.BuiltIn(s.System) && s.System != Default().System:
		return errorf("--system %s and --system-file %s (system %s): give one", quote.Short(s.System), s.SystemFile, l.System.Name)
	case s.SystemFileSHA256 != "" && s.SystemFileSHA256 != l.SHA256:
		return errorf("system file %s has changed since the run (sha256 %s, the run's %s)", s.SystemFile, l.SHA256[:12], shortHash(s.SystemFileSHA256))
	}
	s.System, s.SystemFileSHA256 = l.System.Name, l.SHA256
	return nil
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return quote.Short(h)
}
