package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// A rule is what a flag's value must be, checked after parsing. want says it in words for the
// error line ("a whole number, at least 1").
type rule struct {
	ok   func(v any) bool
	want string
}

// whole is the value of an int or int64 flag.
func whole(v any) int64 {
	if i, ok := v.(int); ok {
		return int64(i)
	}
	return v.(int64)
}

func atLeast(n int64) rule {
	return rule{func(v any) bool { return whole(v) >= n }, fmt.Sprintf("a whole number, at least %d", n)}
}

func between(lo, hi int64) rule {
	return rule{func(v any) bool { i := whole(v); return i >= lo && i <= hi }, fmt.Sprintf("a whole number from %d to %d", lo, hi)}
}

// unlimitedOrAtLeast allows -1 for "no limit".
func unlimitedOrAtLeast(n int64) rule {
	return rule{func(v any) bool { i := whole(v); return i == -1 || i >= n }, fmt.Sprintf("-1 (unlimited) or a whole number, at least %d", n)}
}

// rateRule is a per-second rate: -1 for "no limit", else above 0.
var rateRule = rule{func(v any) bool { f := v.(float64); return f == -1 || f > 0 }, "-1 (unlimited) or a number per second above 0"}

// notNegative is the rule of every duration flag unless it says otherwise: 0 means the
// documented default.
var notNegative = rule{func(v any) bool { return v.(time.Duration) >= 0 }, "a duration such as 500ms, 30s, 10m or 1h, not negative (0: the default)"}

// minDuration is a duration of at least min, or 0 for the default.
func minDuration(min time.Duration) rule {
	return rule{func(v any) bool { d := v.(time.Duration); return d == 0 || d >= min },
		fmt.Sprintf("a duration of at least %v, such as 1s or 30s (0: the default)", min)}
}

// nonEmpty is for settings whose absence means something else (no auth: open dev mode), so
// that an empty value given on purpose, RTLAB_AUTH_SECRET= say, is refused, not taken as absent.
func nonEmpty(what string) rule {
	return rule{func(v any) bool { return v.(string) != "" }, what}
}

// anyDuration is for the few durations whose negative values mean something.
var anyDuration = rule{func(any) bool { return true }, "a duration such as 500ms, 30s, 10m or 1h"}

// hostPort is a listen address; empty passes when emptyOK.
func hostPort(emptyOK bool) rule {
	want := "host:port, such as 127.0.0.1:8080 or :8080"
	if emptyOK {
		want += ", or empty"
	}
	return rule{func(v any) bool {
		s := v.(string)
		if s == "" {
			return emptyOK
		}
		_, port, err := net.SplitHostPort(s)
		if err != nil {
			return false
		}
		n, err := strconv.Atoi(port)
		return err == nil && n >= 0 && n <= 65535
	}, want}
}

// oneOf allows the given words only.
func oneOf(words ...string) rule {
	return rule{func(v any) bool {
		for _, w := range words {
			if v.(string) == w {
				return true
			}
		}
		return false
	}, strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]}
}

// typeWant says what a flag of v's type takes, for flags without a rule.
func typeWant(v any) string {
	switch v.(type) {
	case int, int64, uint, uint64:
		return "a whole number"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	case time.Duration:
		return anyDuration.want
	}
	return "a value"
}

// flags is a FlagSet whose errors are one line naming the flag, the value as given and what is
// expected, never followed by the usage text, and whose values are checked against rules
// after parsing, so that an invalid value is refused instead of replaced by a default.
type flags struct {
	*flag.FlagSet
	cmd   string          // "rtlab serve", the prefix of every error line
	rules map[string]rule // by flag name; durations without one must not be negative
	given map[string]string
	usage func(io.Writer) // the help text for -h, before the flags
	// env, when set, is the prefix of the environment variables that set flags
	// (RTLAB_MAX_FRAME for --max-frame); a flag on the command line wins over its variable.
	env    string
	getenv func(string) (string, bool)
	// fromEnv holds, by flag name, the value its variable gave, for error lines.
	fromEnv map[string]string
	// defText replaces a flag's default in -h where no single value is the default (it
	// depends on another flag).
	defText map[string]string
	// positional holds the arguments that are not flags, in order, wherever they stood.
	positional []string
}

func newFlags(cmd string, usage func(io.Writer)) *flags {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flags{FlagSet: fs, cmd: cmd, rules: map[string]rule{}, given: map[string]string{}, usage: usage,
		getenv: os.LookupEnv, fromEnv: map[string]string{}, defText: map[string]string{}}
}

// envName is the environment variable of flag name: RTLAB_MAX_FRAME for max-frame.
func (f *flags) envName(name string) string {
	return f.env + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// source names where the named flag's value came from, for error lines: --name, or the
// environment variable when the command line did not set it.
func (f *flags) source(name string) string {
	if v, ok := f.fromEnv[name]; ok && f.given[name] == v {
		return "$" + f.envName(name)
	}
	return "--" + name
}

// setFromEnv sets every flag whose environment variable is set; the command line, parsed
// after, wins. It returns the error line of a value the flag does not take.
func (f *flags) setFromEnv() string {
	if f.env == "" {
		return ""
	}
	var bad string
	f.VisitAll(func(fl *flag.Flag) {
		v, ok := f.getenv(f.envName(fl.Name))
		if !ok || bad != "" {
			return
		}
		f.fromEnv[fl.Name] = v
		if err := f.Set(fl.Name, v); err != nil {
			bad = fmt.Sprintf("$%s %q: want %s", f.envName(fl.Name), v, f.want(fl.Name))
		}
	})
	return bad
}

// printDefaults is -h's list of flags: each with what it takes and its real default, once.
func (f *flags) printDefaults(w io.Writer) {
	f.VisitAll(func(fl *flag.Flag) {
		_, usage := flag.UnquoteUsage(fl)
		kind := ""
		switch fl.Value.(flag.Getter).Get().(type) {
		case string:
			kind = "string"
		case int, int64:
			kind = "int"
		case float64:
			kind = "float"
		case time.Duration:
			kind = "duration"
		}
		fmt.Fprintf(w, "  --%s", fl.Name)
		if kind != "" {
			fmt.Fprintf(w, " %s", kind)
		}
		fmt.Fprintf(w, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
		if d := f.defaultText(fl); d != "" {
			fmt.Fprintf(w, " (default %s)", d)
		}
		fmt.Fprintln(w)
	})
	if ex := f.envExample(); ex != nil {
		fmt.Fprintf(w, "\nEvery flag may also be given in the environment: --%s as %s=%s (the command line wins).\n", ex.Name, f.envName(ex.Name), ex.DefValue)
	}
}

// envExample is the flag -h's environment example names: --max-frame where there is one, else
// the first with a default that is not a switch; nil without environment variables.
func (f *flags) envExample() *flag.Flag {
	if f.env == "" {
		return nil
	}
	if fl := f.Lookup("max-frame"); fl != nil {
		return fl
	}
	var ex *flag.Flag
	f.VisitAll(func(fl *flag.Flag) {
		if _, isBool := fl.Value.(boolRecorder); ex == nil && !isBool && fl.DefValue != "" {
			ex = fl
		}
	})
	return ex
}

// defaultText is the default -h shows for fl: durations as written (10m, not 10m0s), strings
// quoted, nothing for a zero default.
func (f *flags) defaultText(fl *flag.Flag) string {
	if d, ok := f.defText[fl.Name]; ok {
		return d
	}
	switch fl.DefValue {
	case "", "0", "0s", "false":
		return ""
	}
	switch fl.Value.(flag.Getter).Get().(type) {
	case string:
		return strconv.Quote(fl.DefValue)
	case time.Duration:
		return shortDuration(fl.DefValue)
	}
	return fl.DefValue
}

// shortDuration drops a duration's zero minutes and seconds: 10m0s is 10m, 24h0m0s is 24h.
func shortDuration(s string) string {
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// rule sets the rule of the named flags.
func (f *flags) rule(r rule, names ...string) {
	for _, n := range names {
		if f.Lookup(n) == nil {
			panic("rule for unknown flag " + n)
		}
		f.rules[n] = r
	}
}

// want is what the named flag takes, in words.
func (f *flags) want(name string) string {
	if r, ok := f.rules[name]; ok {
		return r.want
	}
	v := f.Lookup(name).Value.(flag.Getter).Get()
	if _, ok := v.(time.Duration); ok {
		return notNegative.want
	}
	return typeWant(v)
}

// valid reports whether the named flag's current value passes its rule.
func (f *flags) valid(name string) bool {
	v := f.Lookup(name).Value.(flag.Getter).Get()
	if r, ok := f.rules[name]; ok {
		return r.ok(v)
	}
	if _, ok := v.(time.Duration); ok {
		return notNegative.ok(v)
	}
	return true
}

// recorder wraps a flag's value to keep the text it was set from, for error lines.
type recorder struct {
	flag.Value
	name  string
	given map[string]string
}

// lastKey holds, in given, the name of the flag set last.
const lastKey = ""

func (r recorder) Set(s string) error {
	r.given[r.name] = s
	r.given[lastKey] = r.name
	return r.Value.Set(s)
}

func (r recorder) Get() any { return r.Value.(flag.Getter).Get() }

// String is nil-safe: the flag package calls it on a zero recorder to tell whether a default
// is worth printing.
func (r recorder) String() string {
	if r.Value == nil {
		return ""
	}
	return r.Value.String()
}

// boolRecorder keeps -flag (without =value) working for boolean flags.
type boolRecorder struct{ recorder }

func (boolRecorder) IsBoolFlag() bool { return true }

// parse parses args. It returns ok=false and the exit code when the command should stop: 0
// after -h (the help on stdout), 2 after an error (one line on stderr).
func (f *flags) parse(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	f.VisitAll(func(fl *flag.Flag) {
		switch fl.Value.(flag.Getter).Get().(type) {
		case int, int64, float64:
			// Numbers need a rule: without one a negative value would pass, and a default
			// would quietly replace it.
			if _, ok := f.rules[fl.Name]; !ok {
				panic(fmt.Sprintf("%s: --%s has no rule", f.cmd, fl.Name))
			}
		}
		r := recorder{Value: fl.Value, name: fl.Name, given: f.given}
		if b, isBool := fl.Value.(interface{ IsBoolFlag() bool }); isBool && b.IsBoolFlag() {
			fl.Value = boolRecorder{r}
		} else {
			fl.Value = r
		}
	})
	if bad := f.setFromEnv(); bad != "" {
		fmt.Fprintf(stderr, "%s: %s\n", f.cmd, bad)
		return 2, false
	}
	// Flags may come after arguments too ("rtlab report a.json --out x.html"): the flag
	// package stops at the first argument that is not a flag, so parsing resumes after it.
	var err error
	for {
		if err = f.Parse(args); err != nil {
			break
		}
		rest := f.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			f.positional = append(f.positional, rest...) // after "--" nothing is a flag
			break
		}
		if len(rest) == 0 {
			break
		}
		f.positional = append(f.positional, rest[0])
		args = rest[1:]
	}
	if errors.Is(err, flag.ErrHelp) {
		if f.usage != nil {
			f.usage(stdout)
		}
		f.printDefaults(stdout)
		return 0, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", f.cmd, f.describe(err))
		return 2, false
	}
	var bad string
	f.Visit(func(fl *flag.Flag) { // only flags given: the defaults are valid
		if bad == "" && !f.valid(fl.Name) {
			bad = fmt.Sprintf("%s %q: want %s", f.source(fl.Name), f.given[fl.Name], f.want(fl.Name))
		}
	})
	if bad != "" {
		fmt.Fprintf(stderr, "%s: %s\n", f.cmd, bad)
		return 2, false
	}
	return 0, true
}

// describe turns the flag package's parse errors into the one-line form.
func (f *flags) describe(err error) string {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag provided but not defined: "), "-")
		return fmt.Sprintf("unknown flag --%s (%s -h lists the flags)", name, f.cmd)
	case strings.HasPrefix(msg, "flag needs an argument: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag needs an argument: "), "-")
		if w := f.want(name); w != "a value" {
			return fmt.Sprintf("--%s needs a value: want %s", name, w)
		}
		return fmt.Sprintf("--%s needs a value (%s -h says what it takes)", name, f.cmd)
	case strings.HasPrefix(msg, "invalid value ") || strings.HasPrefix(msg, "invalid boolean value "):
		// The flag whose Set failed is the last one set.
		if name := f.given[lastKey]; name != "" {
			return fmt.Sprintf("--%s %q: want %s", name, f.given[name], f.want(name))
		}
	case strings.HasPrefix(msg, "bad flag syntax: "):
		return fmt.Sprintf("%s: want --name or --name=value", msg)
	}
	return msg
}

// isSet reports whether the named flag was given, on the command line or in the environment.
func (f *flags) isSet(name string) bool {
	_, ok := f.given[name]
	return ok && name != lastKey
}
