package bench

import (
	"embed"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/rtlab/rtlab/internal/results"
	"github.com/rtlab/rtlab/internal/target"
)

// builtinProfiles are the profiles --profile builtin:NAME names: rtlab's seed routes, the
// Spring STOMP peer, RabbitMQ Web-STOMP, a Socket.IO location app and Centrifugo.
//
//go:embed profiles/*.yaml
var builtinProfiles embed.FS

// BuiltinProfiles lists the names of the built-in profiles.
func BuiltinProfiles() []string {
	entries, _ := builtinProfiles.ReadDir("profiles")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return out
}

// LoadProfile reads a profile file, or builtin:NAME.
func LoadProfile(name string) (*target.Profile, error) {
	if b, ok := strings.CutPrefix(name, "builtin:"); ok {
		src, err := builtinProfiles.ReadFile(path.Join("profiles", b+".yaml"))
		if err != nil {
			return nil, fmt.Errorf("no built-in profile %q; want one of %s", b, strings.Join(BuiltinProfiles(), ", "))
		}
		return target.Parse(b+".yaml", ".", src)
	}
	return target.ParseFile(name)
}

// checkProfile reads --profile; its transports are the run's unless --transport names some.
// It runs before the scenario fills its default transports.
func (o *Options) checkProfile() error {
	if o.Profile == "" {
		return nil
	}
	if o.Target == "" {
		return usageErr("--profile", "needs --target, the base URL of the server it describes")
	}
	if o.TargetKind != "" && o.TargetKind != results.KindRTLab {
		return usageErr("--profile", "replaces --target-kind: the profile says what the target speaks")
	}
	if o.Scenario != "" && o.Scenario != ScenarioLocation {
		return usageErr("--profile", "runs the location scenario only")
	}
	p, err := LoadProfile(o.Profile)
	if err != nil {
		return usageErr("--profile", "%v", err)
	}
	if _, err := p.Auth.Token(0, 0, "u0", time.Now()); err != nil {
		return usageErr("--profile", "%v", err)
	}
	o.profile = p
	if len(o.Transports) == 0 {
		for _, t := range p.Names() {
			if slices.Contains(profileClients, t) {
				o.Transports = append(o.Transports, t)
			}
		}
	}
	for _, t := range o.Transports {
		switch {
		case p.Transports[t] == nil && !(t == "socketio" && p.SocketIO != nil):
			return usageErr("--transport", "%s: the profile %s does not describe it (it has %s)", t, p.File, strings.Join(p.Names(), ", "))
		case !slices.Contains(profileClients, t):
			return usageErr("--transport", "%s: the bench has no client for it yet", t)
		}
	}
	if len(o.Transports) == 0 {
		return usageErr("--profile", "%s describes no transport the bench can run", p.File)
	}
	return nil
}
