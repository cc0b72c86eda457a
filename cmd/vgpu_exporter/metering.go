package main

import (
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/vgpu-exporter/vgpu_exporter/internal/flagvalue"
	"github.com/vgpu-exporter/vgpu_exporter/tenant"
)

// meteringConfig is what the --metering.* flags set: the prices of the
// cost series while the tenants file has no metering section.
type meteringConfig struct {
	Currency           string
	PerGPUHour, PerKWh *float64 // nil: not given
}

func addMeteringFlags(app *kingpin.Application, c *meteringConfig) {
	app.Flag("metering.currency", "ISO 4217 code of the currency of the --metering.price-* flags (USD, EUR): the currency label of vgpu_tenant_cost_total, whose values are in its base unit (USD: dollars). Needed with a price.").
		PlaceHolder("CODE").StringVar(&c.Currency)
	app.Flag("metering.price-per-gpu-hour", "Price of one reserved GPU-hour (a whole GPU held for an hour; a MIG instance, its part of the SMs) in --metering.currency: serves vgpu_tenant_cost_total{component=\"gpu_time\"}. A tenants file's metering section replaces every --metering.* flag. Default: none.").
		PlaceHolder("PRICE").SetValue(flagvalue.FloatPtr{Name: "metering.price-per-gpu-hour", P: &c.PerGPUHour})
	app.Flag("metering.price-per-kwh", "Price of one kWh of the energy apportioned to a tenant in --metering.currency: serves vgpu_tenant_cost_total{component=\"energy\"}. A tenants file's metering section replaces every --metering.* flag. Default: none.").
		PlaceHolder("PRICE").SetValue(flagvalue.FloatPtr{Name: "metering.price-per-kwh", P: &c.PerKWh})
}

// prices returns the prices the flags give (nil when none is given) and
// their problems, each naming its flag.
func (c *meteringConfig) prices() (*tenant.Prices, []error) {
	return tenant.FlagPrices(c.Currency, c.PerGPUHour, c.PerKWh)
}

// given names the --metering.* flags given.
func (c *meteringConfig) given() []string {
	var out []string
	if c.Currency != "" {
		out = append(out, "--metering.currency")
	}
	if c.PerGPUHour != nil {
		out = append(out, "--metering.price-per-gpu-hour")
	}
	if c.PerKWh != nil {
		out = append(out, "--metering.price-per-kwh")
	}
	return out
}

// warnMeteringReplaced warns where the tenants file cfg (source) has a
// metering section and --metering.* flags are given beside it: the
// section replaces every flag, which would otherwise go unused without a
// word.
func warnMeteringReplaced(logger log.Logger, source string, cfg *tenant.Config, m *meteringConfig) {
	flags := m.given()
	if cfg.Metering == nil || len(flags) == 0 {
		return
	}
	flagPrices, _ := m.prices() // checked by validate
	level.Warn(logger).Log("msg", "the tenants file's metering section replaces every --metering.* flag: the flags given are not used",
		"file", source, "file_prices", cfg.Metering.String(), "flags", strings.Join(flags, " "), "flag_prices", flagPrices.String())
}
