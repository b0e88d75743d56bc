package nandsim

import (
	"fmt"
	"math"
	"time"
)

// ProjectedLifetime projects how long the device lasts at the wear rate of
// a workload that caused `erases` block erases over `over` of real time.
//
// Model: the device wears out when its whole P/E budget is spent, assuming
// wear leveling spreads erases evenly from now on. The remaining budget is
// the sum over blocks of max(0, peLimit - erase count); at `erases` per
// `over`, it lasts remaining / erases x over. The result is in days, +Inf
// when the workload erased nothing. The worst block may die sooner without
// wear leveling: compare EraseCountMax in Stats with peLimit for that.
func (s *SSD) ProjectedLifetime(peLimit int64, erases int64, over time.Duration) (days float64, err error) {
	if peLimit <= 0 || erases < 0 || over <= 0 {
		return 0, fmt.Errorf("projected lifetime: need a positive P/E limit and duration and non-negative erases, got %d, %v, %d", peLimit, over, erases)
	}
	s.mu.Lock()
	var remaining int64
	for _, e := range s.f.erases {
		remaining += max(peLimit-int64(e), 0)
	}
	s.mu.Unlock()
	return LifetimeDays(remaining, erases, over), nil
}

// LifetimeDays is remaining / (erases per `over`), in days: how long a
// budget of `remaining` block erases lasts at the observed erase rate.
func LifetimeDays(remaining, erases int64, over time.Duration) float64 {
	if erases <= 0 {
		return math.Inf(1)
	}
	perDay := float64(erases) / over.Hours() * 24
	return float64(remaining) / perDay
}

// EnduranceDays is FlashNeuron's (Section 3.4) guaranteed-endurance
// arithmetic: an SSD rated for `dwpd` drive writes per day over `years`
// absorbs dwpd x years x 365 x capacityGB of writes; a workload moving
// bandwidthGBps of which writeShare are writes, running 24x7, spends that in
// dwpd x years x 365 x capacityGB / (writeShare x bandwidthGBps) seconds.
// 3 DWPD, 5 years, 8000 GB, 50% writes at 3.3 GB/s gives 307 days.
func EnduranceDays(dwpd, years, capacityGB, writeShare, bandwidthGBps float64) float64 {
	seconds := dwpd * years * 365 * capacityGB / (writeShare * bandwidthGBps)
	return seconds / 86400
}
