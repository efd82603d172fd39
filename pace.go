package waitroom

import (
	"math"
	"time"
)

// Pace is how a room's admissions have really gone lately, measured by the
// store from every instance's admission ticks: the input of the ETA.
type Pace struct {
	// Efficiency is the users admitted within the rate per second over
	// the configured rate, averaged over the recent time users were
	// waiting: 1 when the admitter keeps the rate, less when MaxActive or
	// the stock hold it back. Admissions that make up no-shows come on
	// top (NoShowShare).
	Efficiency float64
	// NoShowShare is the no-shows found lately over the admissions
	// lately; MakeUp says the room admits again for them (no MaxActive).
	// A no-show is found one first-use deadline after its admission, so
	// the share lags the admissions: RoomConfig.Estimate corrects it.
	NoShowShare float64
	MakeUp      bool
	// AbandonShare is, of the users recently taken from the head, the
	// share found gone (abandoned) rather than admitted: the share of the
	// places ahead of a user that will not cost it any wait.
	AbandonShare float64
	// LeaveShare is the share of recent arrivals that leave the queue
	// (Leave) before their turn (scaled up, while a crowd has just begun
	// coming, for the latest arrivals' leavers not gone yet), and
	// LeaveAfter how many arrivals came
	// after a leaver before it left, on average: a newcomer has about
	// LeaveShare × LeaveAfter leavers ahead of it that will not cost it
	// any wait.
	LeaveShare, LeaveAfter float64
	// Waiting is the queue's length when the pace was read (the server
	// sets it from Stats): the users behind a position, who came after
	// it, tell how many of the leavers ahead of it are gone already.
	Waiting int64
	// Measured is how much waiting time the averages cover (decayed
	// over PaceWindow); below MinPaceMeasured the configured rate stands.
	Measured time.Duration
}

// Pace measurement: exponentially decayed sums over about PaceWindow of the
// time users waited, so the ETA follows a change of pace (a cap reached,
// the share of leavers) within seconds, yet does not jump between polls:
// at 30 users/s the window holds some 300 admissions.
const (
	PaceWindow      = 10 * time.Second
	MinPaceMeasured = 5 * time.Second
	// MaxPaceStep bounds the time one admission tick adds: a gap with no
	// admitter at all is not counted as waiting at the pace.
	MaxPaceStep = 2 * time.Second
)

// PaceSums are the decayed sums Pace is made of. The Redis admission
// function keeps the same sums with the same arithmetic.
type PaceSums struct {
	Time      float64 // seconds users were waiting
	Regular   float64 // admissions within the rate, each over the rate: seconds' worth
	Admitted  float64 // every admission, made-up ones included
	Abandoned float64 // users skipped at the head as gone
	NoShows   float64 // tokens found expired unconfirmed
	Arrivals  float64 // places given in the queue
	Left      float64 // users who left the queue
	// LeftAfter sums, over those who left, the arrivals after each
	// entered until it left.
	LeftAfter float64
}

// PaceTick is what happened in a room between two admission ticks.
type PaceTick struct {
	Admitted int // tokens issued
	Regular  int // of them, within the rate; the rest made up no-shows
	Skipped  int // users found gone at the head
	NoShows  int // tokens found expired unconfirmed
	// Arrivals, Left and LeftAfter are the places given, the users who
	// left the queue, and the arrivals after each of them until it left,
	// since the previous tick.
	Arrivals, Left, LeftAfter int64
}

// Add decays the sums by dt (seconds since the previous tick) and adds
// tick at rate, when users were still waiting after it (else the room kept
// up and nothing is measured).
func (p *PaceSums) Add(dt float64, tick PaceTick, rate float64, stillWaiting bool) {
	if !stillWaiting || dt <= 0 || rate <= 0 {
		return
	}
	dt = min(dt, MaxPaceStep.Seconds())
	d := math.Exp(-dt / PaceWindow.Seconds())
	p.Time = p.Time*d + dt
	p.Regular = p.Regular*d + float64(tick.Regular)/rate
	p.Admitted = p.Admitted*d + float64(tick.Admitted)
	p.Abandoned = p.Abandoned*d + float64(tick.Skipped)
	p.NoShows = p.NoShows*d + float64(tick.NoShows)
	p.Arrivals = p.Arrivals*d + float64(tick.Arrivals)
	p.Left = p.Left*d + float64(tick.Left)
	p.LeftAfter = p.LeftAfter*d + float64(tick.LeftAfter)
}

// Pace turns the sums into a Pace. makeUp says the room makes up no-shows
// (no MaxActive).
func (p PaceSums) Pace(makeUp bool) Pace {
	var pace Pace
	if p.Time > 0 {
		pace.MakeUp = makeUp
		pace.Efficiency = p.Regular / p.Time
		pace.Measured = time.Duration(p.Time * float64(time.Second))
	}
	if p.Admitted > 0 {
		pace.NoShowShare = p.NoShows / p.Admitted
	}
	if n := p.Admitted + p.Abandoned; n > 0 {
		pace.AbandonShare = p.Abandoned / n
	}
	if p.Left > 0 {
		pace.LeaveAfter = p.LeftAfter / p.Left
	}
	if p.Arrivals > 0 {
		// A leaver leaves LeaveAfter arrivals after its own, so the
		// leavers counted belong to the arrivals of that long ago: while
		// the measurement is young (a crowd that has just come) the
		// recent arrivals' leavers are not counted yet, and the share is
		// scaled up for them, as the no-shows' (Pace.admitting).
		share := p.Left / p.Arrivals
		lag := pace.LeaveAfter * p.Time / p.Arrivals // seconds, at the arrivals' pace
		if scale, ok := lagScale(p.Time, lag); ok {
			share *= scale
		}
		pace.LeaveShare = min(share, 1)
	}
	return pace
}

// lagScale is how many times more of an event there is than the sums
// show when each is found lag after what causes it, for sums of a steady
// flow decayed over PaceWindow that began measured ago (measured is the
// decayed time, 1 − e^(−t/w) of the window): those caused within lag of
// now are not found yet. ok is false when too few causes are lag old to
// tell (under a quarter of those measured).
func lagScale(measured, lag float64) (scale float64, ok bool) {
	w := PaceWindow.Seconds()
	seen := min(measured/w, 1) // 1 − e^(−t/w), t the time measured
	old := 1 - (1-seen)*math.Exp(lag/w)
	if old <= 0 || old < seen/4 {
		return 1, false
	}
	return seen / old, true
}

// admitting is the measured admission rate over the configured one, the
// made-up no-shows included: each admission within the rate brings
// 1 ÷ (1 − s) admissions in all where the room makes up no-shows, s being
// their share, at most twice. That is the pace the room settles at, known
// as soon as the no-shows are, rather than after the made-up admissions
// (themselves partly no-shows) have played out.
//
// A no-show is found firstUse after its admission, so the no-shows
// measured belong to the admissions of firstUse earlier: while the
// measurement is younger than the window (the room has just begun), those
// are fewer than the admissions measured, and the share is scaled by how
// many fewer, for sums decayed over PaceWindow at a steady pace. Before
// any admission is firstUse old, nothing is known of no-shows.
func (p Pace) admitting(firstUse time.Duration) float64 {
	e := p.Efficiency
	if !p.MakeUp || p.NoShowShare <= 0 {
		return e
	}
	scale, ok := lagScale(p.Measured.Seconds(), firstUse.Seconds())
	if !ok {
		return e
	}
	return e / (1 - min(p.NoShowShare*scale, 0.5))
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
// pace: the places ahead that will not be left or abandoned, at the
// measured admission rate (the configured rate times the measured
// efficiency and no-show make-up, so an operator's rate change moves it
// at once; the configured rate alone before there is a measurement). The
// range adds the spread of how many of those ahead turn out gone
// (binomial) and of the pace, plus a slice and a poll of granularity.
func (c RoomConfig) Estimate(position int64, p Pace) Estimate {
	if position < 1 {
		return Estimate{}
	}
	ahead := float64(position - 1)
	rate, stay := c.Rate, ahead
	if p.Measured >= MinPaceMeasured && p.Efficiency > 0 {
		rate = c.Rate * min(p.admitting(c.FirstUseWithin), 2) // no-show make-up at most doubles it
		// Leavers leave a while after they came: of those who came before
		// this user, the ones who have not left yet are about the last
		// LeaveAfter arrivals' share of leavers, less the arrivals since
		// (those behind it). At most half of those ahead, should the
		// figures be off.
		behind := float64(max(p.Waiting-position, 0))
		leavers := min(p.LeaveShare*max(p.LeaveAfter-behind, 0), ahead/2)
		stay = (ahead - leavers) * (1 - min(max(p.AbandonShare, 0), 0.95))
	}
	if rate <= 0 {
		return Estimate{}
	}
	gone := 0.0 // the share of those ahead who will not be admitted
	if ahead > 0 {
		gone = 1 - stay/ahead
	}
	sd := math.Sqrt(ahead * gone * (1 - gone))
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
