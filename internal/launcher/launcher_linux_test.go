package launcher

import (
	"reflect"
	"testing"
)

func TestParsePIDs(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"", nil},
		{"12", []int{12}},
		{"12 345 6 ", []int{12, 345, 6}},
		{"7\n", []int{7}},
	}
	for _, tt := range tests {
		if got := parsePIDs([]byte(tt.in)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parsePIDs(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
