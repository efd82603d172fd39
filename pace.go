package waitroom

import (
	"math"
	"time"
)

// Pace is how a room's admissions have really gone lately, measured by the
// store from every instance's admission ticks: the input of the ETA.
type Pace struct {
	// Efficiency is the users admitted per second over the configured
	// rate, averaged over the recent time users were waiting: 1 when the
	// admitter keeps the rate, less when MaxActive or the stock hold it
	// back, more while no-shows are made up.
	Efficiency float64
	// AbandonShare is, of the users recently taken from the head, the
	// share found gone (abandoned) rather than admitted: the share of the
	// places ahead of a user that will not cost it any wait.
	AbandonShare float64
	// Measured is how much waiting time the averages cover (decayed
	// over PaceWindow); below MinPaceMeasured the configured rate stands.
	Measured time.Duration
}

// Pace measurement: exponentially decayed sums over about PaceWindow of the
// time users waited, so the ETA follows a change of pace (no-shows being
// made up, a cap reached) within seconds, yet does not jump between polls:
// at 30 users/s the window holds some 300 admissions.
const (
	PaceWindow      = 10 * time.Second
	MinPaceMeasured = 5 * time.Second
	// MaxPaceStep bounds the time one admission tick adds: a gap with no
	// admitter at all is not counted as waiting at the pace.
	MaxPaceStep = 2 * time.Second
)

// PaceSums are the decayed sums Pace is made of. The Redis admission
// script keeps the same sums with the same arithmetic.
type PaceSums struct {
	Time      float64 // seconds users were waiting
	Regular   float64 // admissions within the rate, each over the rate: seconds' worth
	Admitted  float64 // every admission, made-up ones included
	Abandoned float64 // users skipped at the head as gone
	NoShows   float64 // tokens found expired unconfirmed
}

// Add decays the sums by dt (seconds since the previous tick) and adds a
// tick that admitted users (regular of them within the rate, the rest
// making up no-shows), skipped gone ones and found no-shows, at rate, when
// users were still waiting after it (else the room kept up and nothing is
// measured).
func (p *PaceSums) Add(dt float64, admitted, regular, skipped, noShows int, rate float64, stillWaiting bool) {
	if !stillWaiting || dt <= 0 || rate <= 0 {
		return
	}
	dt = min(dt, MaxPaceStep.Seconds())
	d := math.Exp(-dt / PaceWindow.Seconds())
	p.Time = p.Time*d + dt
	p.Regular = p.Regular*d + float64(regular)/rate
	p.Admitted = p.Admitted*d + float64(admitted)
	p.Abandoned = p.Abandoned*d + float64(skipped)
	p.NoShows = p.NoShows*d + float64(noShows)
}

// Pace turns the sums into a Pace. makeUp says the room makes up no-shows
// (no MaxActive): then each admission within the rate brings 1 ÷ (1 − s)
// admissions in all, s being the measured share of no-shows, at most
// twice: the pace the room settles at, known one first-use deadline after
// the no-shows begin rather than after the made-up admissions (themselves
// partly no-shows) have played out.
func (p PaceSums) Pace(makeUp bool) Pace {
	var pace Pace
	if p.Time > 0 {
		pace.Efficiency = p.Regular / p.Time
		if makeUp && p.Admitted > 0 {
			pace.Efficiency /= 1 - min(p.NoShows/p.Admitted, 0.5)
		}
		pace.Measured = time.Duration(p.Time * float64(time.Second))
	}
	if n := p.Admitted + p.Abandoned; n > 0 {
		pace.AbandonShare = p.Abandoned / n
	}
	return pace
}

// Estimate is a waiting user's expected wait and a range around it.
type Estimate struct {
	ETA time.Duration
	// Low and High bound about 80% of outcomes (a 10–90% range).
	Low, High time.Duration
	// Rate is the admission rate the estimate assumed, users/s.
	Rate float64
}

// z90 is the 90th percentile of the standard normal distribution.
const z90 = 1.2816

// paceSpread is the relative spread assumed for the future pace.
const paceSpread = 0.05

// Estimate is the wait of the user at position under the room's measured
// pace: the places ahead that will not be abandoned, at the measured
// admission rate (the configured rate times the measured efficiency, so an
// operator's rate change moves it at once; the configured rate alone
// before there is a measurement). The range adds the spread of how many of
// those ahead turn out gone (binomial) and of the pace, plus a slice and a
// poll of granularity.
func (c RoomConfig) Estimate(position int64, p Pace) Estimate {
	if position < 1 {
		return Estimate{}
	}
	rate, share := c.Rate, 0.0
	if p.Measured >= MinPaceMeasured && p.Efficiency > 0 {
		rate = c.Rate * min(p.Efficiency, 2) // no-show make-up at most doubles it
		share = min(max(p.AbandonShare, 0), 0.95)
	}
	if rate <= 0 {
		return Estimate{}
	}
	ahead := float64(position - 1)
	stay := ahead * (1 - share) // ahead and still there when their turn comes
	sd := math.Sqrt(ahead * share * (1 - share))
	seconds := func(users, r float64) time.Duration {
		return time.Duration(min(max(users, 0)/r, MaxETA.Seconds()) * float64(time.Second))
	}
	e := Estimate{Rate: rate, ETA: seconds(stay+1, rate)}
	e.Low = max(seconds(stay+1-z90*sd, rate*(1+z90*paceSpread))-c.Slice, 0)
	e.High = seconds(stay+1+z90*sd, rate*(1-z90*paceSpread)) + c.Slice + MinPoll
	return e
}

// MaxETA caps estimates: at tiny rates a long queue would otherwise
// overflow a time.Duration.
const MaxETA = 30 * 24 * time.Hour
