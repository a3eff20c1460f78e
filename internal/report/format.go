package report

import (
	"math"
	"strconv"
	"strings"
)

// none is what a cell shows when a figure was not measured (no samples, no /proc access), so
// a reader never mistakes "unknown" for zero.
const none = "—"

// groupDigits inserts thousands separators into the integer part of a formatted number, because
// "1234567" has to be counted and "1,234,567" does not.
func groupDigits(s string) string {
	sign := ""
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		sign, s = s[:1], s[1:]
	}
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	if len(intPart) <= 3 {
		return sign + s
	}
	var b strings.Builder
	b.Grow(len(s) + len(intPart)/3 + 1)
	b.WriteString(sign)
	head := len(intPart) % 3
	if head > 0 {
		b.WriteString(intPart[:head])
	}
	for i := head; i < len(intPart); i += 3 {
		if b.Len() > len(sign) {
			b.WriteByte(',')
		}
		b.WriteString(intPart[i : i+3])
	}
	b.WriteString(frac)
	return b.String()
}

// fmtInt formats a count with thousands separators.
func fmtInt(n int64) string { return groupDigits(strconv.FormatInt(n, 10)) }

// fmtFixed formats v with dec decimals and thousands separators.
func fmtFixed(v float64, dec int) string {
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if s == "-0" || strings.HasPrefix(s, "-0.") && strings.Trim(s[3:], "0") == "" {
		s = s[1:] // never show "-0.0"
	}
	return groupDigits(s)
}

// fmtMs formats milliseconds with precision that shrinks as the value grows: sub-millisecond
// latencies on a LAN need three decimals, seconds-long stalls need none.
func fmtMs(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a < 1:
		return fmtFixed(v, 3)
	case a < 10:
		return fmtFixed(v, 2)
	case a < 100:
		return fmtFixed(v, 1)
	default:
		return fmtFixed(v, 0)
	}
}

// fmtRatio formats a delivery ratio (0..1) as a percentage without the sign. It truncates rather
// than rounds so 99.896 % reads "99.89", never "99.90": a figure that fails the 99.9 % threshold
// must not look as if it passed.
func fmtRatio(r float64) string {
	p := math.Floor(r*100*100) / 100
	if r >= 1 {
		return "100"
	}
	return strconv.FormatFloat(p, 'f', 2, 64)
}

// fmtCPU formats a CPU percentage (100 = one core).
func fmtCPU(v float64) string { return fmtFixed(v, 1) }

// fmtRate formats a per-second rate.
func fmtRate(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a < 10:
		return fmtFixed(v, 2)
	case a < 1000:
		return fmtFixed(v, 1)
	default:
		return fmtFixed(v, 0)
	}
}

// fmtBytes formats a byte count in IEC units (KiB, MiB, GiB), because RSS is allocated in pages
// and readers compare it with `free -h`.
func fmtBytes(v float64) string {
	neg := v < 0
	a := math.Abs(v)
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for a >= 1024 && i < len(units)-1 {
		a /= 1024
		i++
	}
	var s string
	switch {
	case i == 0:
		s = strconv.FormatFloat(a, 'f', 0, 64)
	case a < 10:
		s = strconv.FormatFloat(a, 'f', 2, 64)
	case a < 100:
		s = strconv.FormatFloat(a, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(a, 'f', 0, 64)
	}
	if neg {
		s = "-" + s
	}
	return s + " " + units[i]
}

// fmtKiB formats bytes as KiB without the unit, for a column whose header carries it.
func fmtKiB(v float64) string {
	k := v / 1024
	if math.Abs(k) < 10 {
		return fmtFixed(k, 2)
	}
	if math.Abs(k) < 100 {
		return fmtFixed(k, 1)
	}
	return fmtFixed(k, 0)
}

// fmtUsers formats a user level as a reader says it: "1,000 users".
func fmtUsers(n int) string {
	if n == 1 {
		return "1 user"
	}
	return fmtInt(int64(n)) + " users"
}

// joinNames joins names as prose: "a", "a and b", "a, b and c".
func joinNames(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	default:
		return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
}

// fmtTimes formats a ratio with two significant digits however small or large, so a tiny ratio
// never reads "0.00×": 0.00059×, 0.50×, 1.0×, 12×, 1,700×.
func fmtTimes(x float64) string {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return strconv.FormatFloat(x, 'g', 2, 64) + "×"
	}
	exp := int(math.Floor(math.Log10(math.Abs(x))))
	if r := math.Round(x/math.Pow(10, float64(exp-1))) * math.Pow(10, float64(exp-1)); math.Abs(r) >= math.Pow(10, float64(exp+1)) {
		exp++ // 9.96 rounds to 10
	}
	if exp >= 1 {
		p := math.Pow(10, float64(exp-1))
		return fmtFixed(math.Round(x/p)*p, 0) + "×"
	}
	return strconv.FormatFloat(x, 'f', 1-exp, 64) + "×"
}
