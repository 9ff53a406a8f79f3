package engine

import (
	"reflect"
	"testing"
)

func TestParseDotenv(t *testing.T) {
	env := map[string]string{"HOME": "/home/u", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name string
		src  string
		want []envPair
	}{
		{"plain", "A=1\nB=two words\n", []envPair{{"A", "1"}, {"B", "two words"}}},
		{"comments and blanks", "# c\n\n  A=1 # trailing\n#B=2\n", []envPair{{"A", "1"}}},
		{"export prefix", "export A=1", []envPair{{"A", "1"}}},
		{"spaces around =", "A = 1 ", []envPair{{"A", "1"}}},
		{"single quotes are literal", `A='x # ${HOME} \n'`, []envPair{{"A", `x # ${HOME} \n`}}},
		{"double quotes escape", `A="a\nb\t\"c\" \\ #x"`, []envPair{{"A", "a\nb\t\"c\" \\ #x"}}},
		{"multi-line double", "A=\"l1\nl2\"\nB=2", []envPair{{"A", "l1\nl2"}, {"B", "2"}}},
		{"multi-line single", "A='l1\nl2'\nB=2", []envPair{{"A", "l1\nl2"}, {"B", "2"}}},
		{"expand from env", "A=${HOME}/x", []envPair{{"A", "/home/u/x"}}},
		{"expand earlier var", "A=1\nB=\"${A}-${A}\"", []envPair{{"A", "1"}, {"B", "1-1"}}},
		{"default", "A=${NOPE:-dflt}\nB=${EMPTY:-e}", []envPair{{"A", "dflt"}, {"B", "e"}}},
		{"missing expands empty", "A=x${NOPE}y", []envPair{{"A", "xy"}}},
		{"escaped dollar", `A="\${HOME}"`, []envPair{{"A", "${HOME}"}}},
		{"bare dollar untouched", "A=$HOME", []envPair{{"A", "$HOME"}}},
		{"key without value skipped", "A\nB=1", []envPair{{"B", "1"}}},
		{"crlf", "A=1\r\nB=2\r\n", []envPair{{"A", "1"}, {"B", "2"}}},
		{"empty value", "A=\nB=''", []envPair{{"A", ""}, {"B", ""}}},
		{"lower-case names", "lower_case=1", []envPair{{"lower_case", "1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDotenv(tt.src, lookup)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseDotenvErrors(t *testing.T) {
	for _, src := range []string{`A="open`, `A='open`, "1A=x", "A B=x"} {
		if _, err := parseDotenv(src, func(string) (string, bool) { return "", false }); err == nil {
			t.Errorf("%q: no error", src)
		}
	}
}
