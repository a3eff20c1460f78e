package report

import (
	"cmp"
	"math"
	"slices"

	"github.com/rtlab/rtlab/internal/results"
)

// level is every transport's run at one user level: one row of the matrix, which is what the
// verdict compares.
type level struct {
	users int
	runs  []*results.Run // ordered by transportLess
}

// transportLess orders transports as the run's --transports flag listed them, then by
// transportRank, so tables follow the order the person asked for.
func transportLess(configs ...[]string) func(a, b string) int {
	pos := func(t string) int {
		n := 0
		for _, c := range configs {
			if i := slices.Index(c, t); i >= 0 {
				return n + i
			}
			n += len(c)
		}
		return n + 100 + transportRank(t)
	}
	return func(a, b string) int {
		return cmp.Or(cmp.Compare(pos(a), pos(b)), cmp.Compare(transportRank(a), transportRank(b)), cmp.Compare(a, b))
	}
}

// levelsOf groups the runs of r by peak users, lowest first.
func levelsOf(r *results.Results) []level {
	byUsers := map[int][]*results.Run{}
	for i := range r.Runs {
		run := &r.Runs[i]
		byUsers[run.Peak] = append(byUsers[run.Peak], run)
	}
	less := transportLess(r.Config.Transports)
	var ls []level
	for users, runs := range byUsers {
		slices.SortStableFunc(runs, func(a, b *results.Run) int { return less(a.Transport, b.Transport) })
		ls = append(ls, level{users: users, runs: runs})
	}
	slices.SortFunc(ls, func(a, b level) int { return cmp.Compare(a.users, b.users) })
	return ls
}

// pair is one transport at one user level in both results of a comparison; a or b is nil when
// that side did not run it.
type pair struct {
	transport string
	a, b      *results.Run
}

// levelPair is one user level of a comparison: b's level, and a's when a ran a different one
// nearest to it (usersA is 0 when both ran the same).
type levelPair struct {
	users  int
	usersA int
	pairs  []pair
}

// title names the level as the comparison shows it: "1,000 users", or "1,200 users (a: 1,000)"
// when the two runs' levels differ.
func (lp levelPair) title() string {
	if lp.usersA != 0 {
		return fmtUsers(lp.users) + " (a: " + fmtInt(int64(lp.usersA)) + ")"
	}
	return fmtUsers(lp.users)
}

// maxLevelGap is how far apart two user levels may be, as a factor, for a comparison to put
// them side by side when a and b ran different ones.
const maxLevelGap = 2.0

// nearestLevels maps each of a's user levels to the b level it is compared with: the same
// level when b ran it, else the nearest one b did not run in a, within maxLevelGap; closest
// pairs first, each level used once. Levels without a partner keep their own number.
func nearestLevels(a, b *results.Results) map[int]int {
	la, lb := levelsOf(a), levelsOf(b)
	type cand struct {
		ua, ub int
		dist   float64
	}
	var cs []cand
	for _, x := range la {
		for _, y := range lb {
			d := math.Abs(math.Log(float64(x.users) / float64(y.users)))
			if d <= math.Log(maxLevelGap) {
				cs = append(cs, cand{x.users, y.users, d})
			}
		}
	}
	slices.SortStableFunc(cs, func(x, y cand) int { return cmp.Compare(x.dist, y.dist) })
	toB := map[int]int{}
	usedB := map[int]bool{}
	for _, c := range cs {
		if _, done := toB[c.ua]; done || usedB[c.ub] {
			continue
		}
		toB[c.ua], usedB[c.ub] = c.ub, true
	}
	for _, x := range la {
		if _, ok := toB[x.users]; !ok {
			toB[x.users] = x.users
		}
	}
	return toB
}

// pairLevels matches the runs of a and b by user level (the nearest when the two ran different
// levels) and transport, keeping the ones only one side ran so the comparison shows what is
// missing rather than hiding it.
func pairLevels(a, b *results.Results) []levelPair {
	type key struct {
		users     int
		transport string
	}
	toB := nearestLevels(a, b)
	fromA := map[int]int{} // b's level → a's, where they differ
	for ua, ub := range toB {
		if ua != ub {
			fromA[ub] = ua
		}
	}
	runs := map[key]*pair{}
	var keys []key
	add := func(rs *results.Results, isB bool) {
		for i := range rs.Runs {
			run := &rs.Runs[i]
			users := run.Peak
			if !isB {
				users = toB[users]
			}
			k := key{users, run.Key()}
			p := runs[k]
			if p == nil {
				p = &pair{transport: run.Key()}
				runs[k] = p
				keys = append(keys, k)
			}
			// A duplicate cell keeps the first run, as levelsOf's table shows it first.
			if isB && p.b == nil {
				p.b = run
			} else if !isB && p.a == nil {
				p.a = run
			}
		}
	}
	add(a, false)
	add(b, true)
	less := transportLess(b.Config.Transports, a.Config.Transports)
	slices.SortFunc(keys, func(x, y key) int {
		return cmp.Or(cmp.Compare(x.users, y.users), less(x.transport, y.transport))
	})
	var out []levelPair
	for _, k := range keys {
		if len(out) == 0 || out[len(out)-1].users != k.users {
			out = append(out, levelPair{users: k.users, usersA: fromA[k.users]})
		}
		last := &out[len(out)-1]
		last.pairs = append(last.pairs, *runs[k])
	}
	return out
}

// sides returns the runs of one side of a level pair, skipping transports that side lacks.
func (lp levelPair) sides(isB bool) []*results.Run {
	var rs []*results.Run
	for _, p := range lp.pairs {
		r := p.a
		if isB {
			r = p.b
		}
		if r != nil {
			rs = append(rs, r)
		}
	}
	return rs
}
