package migration

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
)

// Write prints the plan for an operator: the scripts, every object with its
// state, owner and action and the reasons under it, the settings, and a
// summary line.
func (p Plan) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s scripts:\n", p.Backend)
	for _, s := range p.Scripts {
		fmt.Fprintf(tw, "  %s\t%s\n", s.Name, scriptLine(s))
	}
	fmt.Fprintln(tw, "\nobjects:")
	fmt.Fprintln(tw, "  KIND\tNAME\tSTATE\tOWNER\tACTION")
	counts := map[Action]int{}
	for _, it := range p.Items {
		counts[it.Action]++
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", it.Kind, it.Name, it.State, owner(p, it), action(it))
		for _, r := range it.Reasons {
			fmt.Fprintf(tw, "  \t    %s\t\t\t\n", printable(r))
		}
	}
	if len(p.Settings) > 0 {
		fmt.Fprintln(tw, "\nsettings (primeflowSettings):")
		for _, s := range p.Settings {
			cur := "(none)"
			if s.Found {
				cur = printable(s.Current)
			}
			switch {
			case s.Want == "":
				fmt.Fprintf(tw, "  %s\t%s\tleft as it is (%s is not set)\n", s.Name, cur, s.From)
			case s.Found && s.Current == s.Want:
				fmt.Fprintf(tw, "  %s\t%s\tthe same as %s\n", s.Name, cur, s.From)
			default:
				fmt.Fprintf(tw, "  %s\t%s\tset to %s (%s)\n", s.Name, cur, printable(s.Want), s.From)
			}
		}
	}
	fmt.Fprintf(tw, "\n%d to create, %d to alter, %d to adopt (captured first), %d refused, %d unchanged\n",
		counts[Create], counts[Alter], counts[Adopt], counts[Refuse], counts[None])
	if n := counts[Refuse]; n > 0 {
		fmt.Fprintf(tw, "a migration now would refuse: %d live objects that primeflow does not own would change; compare them, then name the ones to take over in --adopt\n", n)
	}
	return tw.Flush()
}

func scriptLine(s ScriptState) string {
	at := s.Applied.AppliedUTC.UTC().Format("2006-01-02 15:04:05")
	again := ": applied again"
	if !s.Runs {
		again = ": not applied again (these scripts run once: a change goes in a new script)"
	}
	switch s.Status {
	case Current:
		return "applied " + at
	case Changed:
		return "CHANGED since it was applied " + at + again
	case Unrecorded:
		return "applied " + at + " before checksums were kept" + again
	}
	return "pending"
}

func owner(p Plan, it Item) string {
	switch {
	case it.Live == nil:
		return "-"
	case !p.Ownership:
		return "primeflow"
	case it.Owned():
		return "primeflow"
	}
	return "not primeflow"
}

func action(it Item) string {
	switch it.Action {
	case Create:
		by := it.DefinedIn() // a module: the definition that counts
		if !it.Kind.IsModule() {
			by = it.Scripts[0] // a table: the script that makes it
		}
		return "create (" + by + ")"
	case Alter:
		return "alter"
	case Adopt:
		return "ADOPT: capture, then alter"
	case Refuse:
		return "REFUSED: not primeflow's; name it in --adopt to take it over"
	}
	return "-"
}

// printable replaces control characters, so a name or value read from a
// database cannot move the terminal's cursor.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}
