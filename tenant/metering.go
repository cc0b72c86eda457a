package tenant

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vgpu-exporter/vgpu_exporter/internal/yamlconf"
)

// Prices are what the operator charges for GPU time and energy, in the
// base unit of Currency (USD: dollars, not cents). A nil price is not
// charged: its cost series are not served. The tenants file's metering
// section, when it has one, replaces the --metering.* flags' prices as a
// whole (docs/metering.md, "Cost").
type Prices struct {
	// Currency is an ISO 4217 code (USD, EUR): the currency label.
	Currency string `yaml:"currency"`
	// PerGPUHour is the price of one reserved GPU-hour (a whole GPU held
	// for an hour; a MIG instance of a seventh of the SMs, a seventh: of
	// the GPU's SMs, or of its full-GPU profile's where the GPU's are not
	// known).
	PerGPUHour *float64 `yaml:"price_per_gpu_hour"`
	// PerKWh is the price of one kWh (3.6 MJ) of apportioned energy.
	PerKWh *float64 `yaml:"price_per_kwh"`
}

// Cost components: the component label of the cost series.
const (
	CostGPUTime = "gpu_time" // reserved GPU-seconds at the price per GPU-hour
	CostEnergy  = "energy"   // apportioned joules at the price per kWh
)

// Keys of the prices, as the tenants file names them (the flags are
// --metering. and the key with '-' for '_').
const (
	PriceKeyCurrency = "currency"
	PriceKeyGPUHour  = "price_per_gpu_hour"
	PriceKeyKWh      = "price_per_kwh"
)

// PriceProblem is one problem of a set of prices: Key is the key it is
// about (one of the PriceKey* constants), Msg what follows its name; Key
// "" is the set as a whole, which gives no price.
type PriceProblem struct {
	Key string
	Msg string
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// Problems lists what is wrong with p: a price that is negative or not a
// finite number, a currency that is missing or not an ISO 4217 code, a
// set with no price.
func (p *Prices) Problems() []PriceProblem {
	var out []PriceProblem
	for _, x := range []struct {
		key string
		v   *float64
	}{{PriceKeyGPUHour, p.PerGPUHour}, {PriceKeyKWh, p.PerKWh}} {
		if x.v != nil && (math.IsNaN(*x.v) || math.IsInf(*x.v, 0) || *x.v < 0) {
			out = append(out, PriceProblem{x.key, "must be a number, 0 or more, got " + strconv.FormatFloat(*x.v, 'g', -1, 64)})
		}
	}
	switch {
	case p.Currency == "" && (p.PerGPUHour != nil || p.PerKWh != nil):
		out = append(out, PriceProblem{PriceKeyCurrency, "is needed with a price: the ISO 4217 code of the prices' currency (USD, EUR)"})
	case p.Currency != "" && !currencyRE.MatchString(p.Currency):
		out = append(out, PriceProblem{PriceKeyCurrency, fmt.Sprintf("%q is not an ISO 4217 code: three capital letters (USD, EUR)", p.Currency)})
	}
	if p.PerGPUHour == nil && p.PerKWh == nil {
		out = append(out, PriceProblem{"", "no price"})
	}
	return out
}

// UnmarshalYAML decodes the metering section and checks it.
func (p *Prices) UnmarshalYAML(n *yaml.Node) error {
	var errs yamlconf.Errors
	*p = Prices{}
	got := errs.Fields(n, "metering", "metering.", p)
	for _, pr := range p.Problems() {
		f, given := got[pr.Key]
		switch {
		case pr.Key == "":
			errs.Addf(n.Line, "metering sets no price: give %s, %s or both", PriceKeyGPUHour, PriceKeyKWh)
		case given && !f.OK:
			// its decoding problem is listed already
		case given:
			errs.Addf(f.Line, "metering.%s %s", pr.Key, pr.Msg)
		default:
			errs.Addf(n.Line, "metering.%s %s", pr.Key, pr.Msg)
		}
	}
	return errs.Err()
}

// String describes the prices for logs and --config.check.
func (p *Prices) String() string {
	if p == nil {
		return "none (no cost series)"
	}
	var parts []string
	if p.PerGPUHour != nil {
		parts = append(parts, fmt.Sprintf("%s %s per GPU-hour", strconv.FormatFloat(*p.PerGPUHour, 'g', -1, 64), p.Currency))
	}
	if p.PerKWh != nil {
		parts = append(parts, fmt.Sprintf("%s %s per kWh", strconv.FormatFloat(*p.PerKWh, 'g', -1, 64), p.Currency))
	}
	return strings.Join(parts, ", ")
}

// Cost is a cumulative charge in one currency since the exporter started,
// in the currency's base unit, at the prices in force at each sample. A
// component is served once it has been priced (and then kept, so that a
// price withdrawn by a reload leaves its counter where it was).
type Cost struct {
	Currency      string
	GPUTime       float64 // reserved GPU-seconds × price per GPU-hour / 3600
	Energy        float64 // joules × price per kWh / 3.6e6
	GPUTimePriced bool
	EnergyPriced  bool
}

// joulesPerKWh converts a price per kWh into one per joule.
const joulesPerKWh = 3.6e6

// addCost charges sec GPU-seconds held and joules of energy at prices p
// (nil: nothing) to the cost in p's currency among costs, which stay
// sorted by currency.
func addCost(costs []Cost, p *Prices, sec, joules float64) []Cost {
	if p == nil {
		return costs
	}
	i, found := slices.BinarySearchFunc(costs, p.Currency, func(c Cost, cur string) int { return strings.Compare(c.Currency, cur) })
	if !found {
		costs = slices.Insert(costs, i, Cost{Currency: p.Currency})
	}
	c := &costs[i]
	if p.PerGPUHour != nil {
		c.GPUTime += sec * *p.PerGPUHour / 3600
		c.GPUTimePriced = true
	}
	if p.PerKWh != nil {
		c.Energy += joules * *p.PerKWh / joulesPerKWh
		c.EnergyPriced = true
	}
	return costs
}

// FlagPrices are the prices the exporter's --metering.* flags give (nil
// when none is given), or their problems, each naming its flag.
func FlagPrices(currency string, perGPUHour, perKWh *float64) (*Prices, []error) {
	if currency == "" && perGPUHour == nil && perKWh == nil {
		return nil, nil
	}
	p := &Prices{Currency: currency, PerGPUHour: perGPUHour, PerKWh: perKWh}
	var errs []error
	for _, pr := range p.Problems() {
		if pr.Key == "" {
			errs = append(errs, fmt.Errorf("--metering.currency %s gives no price: set --metering.price-per-gpu-hour, --metering.price-per-kwh or both", currency))
			continue
		}
		errs = append(errs, fmt.Errorf("--metering.%s %s", strings.ReplaceAll(pr.Key, "_", "-"), pr.Msg))
	}
	if errs != nil {
		return nil, errs
	}
	return p, nil
}

// PricesInUse describes the prices c's metering section or else the flags'
// prices (FlagPrices) give, and where they come from.
func (c *Config) PricesInUse(flags *Prices) string {
	switch {
	case c.Metering != nil:
		return c.Metering.String() + " (the tenants file's metering section)"
	case flags != nil:
		return flags.String() + " (the --metering.* flags)"
	}
	return flags.String()
}
