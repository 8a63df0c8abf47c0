//! Search strategies over a define-by-run space: each proposes how to evaluate the space for
//! its next candidate (which choices to pin, which seed draws the rest) and learns what the
//! evaluation asked for and what the candidate cost. All are deterministic given their seed.

use crate::ir::Seen;
use crate::ir::params::mix;
use std::collections::BTreeMap;

/// Which strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Every point, in order (the choices' odometer, following the parameters each point asks).
    Exhaustive,
    /// Uniformly drawn points, without repeats.
    Random,
    /// Tournament selection, crossover and mutation of measured points, as in Tensor
    /// Comprehensions' and TVM MetaSchedule's evolutionary search; a share of random points
    /// keeps exploring.
    Evolutionary,
    /// Random points ranked by a cost model learned from the candidates measured so far (and
    /// the tuning database): of each pool of evaluated points, the ones the model predicts
    /// fastest are compiled ([`super::model`]).
    Model,
}

impl std::str::FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Strategy, String> {
        match s {
            "exhaustive" => Ok(Strategy::Exhaustive),
            "random" => Ok(Strategy::Random),
            "evolutionary" => Ok(Strategy::Evolutionary),
            "model" => Ok(Strategy::Model),
            _ => Err(format!("expected exhaustive, random, evolutionary or model, found `{s}`")),
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Strategy::Exhaustive => "exhaustive",
            Strategy::Random => "random",
            Strategy::Evolutionary => "evolutionary",
            Strategy::Model => "model",
        })
    }
}

/// How to evaluate the space for one candidate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Proposal {
    /// Choices fixed by index.
    pub pinned: BTreeMap<String, usize>,
    /// The seed that draws every other choice (`None`: their first choice).
    pub seed: Option<u64>,
}

/// A strategy's state.
pub struct Search {
    strategy: Strategy,
    rng: u64,
    /// Proposals made.
    made: u64,
    /// Exhaustive: what the last evaluation asked (the odometer's reading).
    last: Option<Vec<Seen>>,
    /// Evolutionary: the measured points that worked, with their cost.
    population: Vec<(Vec<Seen>, f64)>,
}

/// Evolutionary search: points drawn at random before selection starts.
pub const INITIAL_RANDOM: usize = 8;
/// Evolutionary search: the share of later points drawn at random (exploration).
const EXPLORE: f64 = 0.15;
/// Evolutionary search: the chance of crossing two parents before mutating.
const CROSSOVER: f64 = 0.3;

impl Search {
    /// A search with `strategy`, deterministic given `seed`.
    pub fn new(strategy: Strategy, seed: u64) -> Search {
        Search { strategy, rng: mix(seed), made: 0, last: None, population: Vec::new() }
    }

    fn next_u64(&mut self) -> u64 {
        self.rng = mix(self.rng);
        self.rng
    }

    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    fn random(&mut self) -> Proposal {
        Proposal { pinned: BTreeMap::new(), seed: Some(self.next_u64()) }
    }

    /// The next candidate to evaluate; `None` when the space is exhausted (exhaustive only).
    pub fn propose(&mut self) -> Option<Proposal> {
        self.made += 1;
        match self.strategy {
            Strategy::Exhaustive => {
                let Some(last) = &self.last else {
                    return (self.made == 1).then(Proposal::default);
                };
                let k = last.iter().rposition(|s| s.index + 1 < s.choices)?;
                let mut pinned: BTreeMap<String, usize> =
                    last[..k].iter().map(|s| (s.name.clone(), s.index)).collect();
                pinned.insert(last[k].name.clone(), last[k].index + 1);
                Some(Proposal { pinned, seed: None })
            }
            // The space's first choices come first: its author's default, the path they
            // expect to be good (TVM's default configuration, a seeded population).
            Strategy::Random | Strategy::Evolutionary | Strategy::Model if self.made == 1 => {
                Some(Proposal::default())
            }
            Strategy::Random | Strategy::Model => Some(self.random()),
            Strategy::Evolutionary => {
                if self.population.len() < INITIAL_RANDOM || self.unit() < EXPLORE {
                    return Some(self.random());
                }
                let a = self.tournament();
                let mut child: BTreeMap<String, (usize, usize)> =
                    self.population[a].0.iter().map(|s| (s.name.clone(), (s.index, s.choices))).collect();
                if self.unit() < CROSSOVER {
                    let b = self.tournament();
                    for s in self.population[b].0.clone() {
                        if self.unit() < 0.5 {
                            child.insert(s.name.clone(), (s.index, s.choices));
                        }
                    }
                }
                // Mutate one parameter (two, a third of the time) to another choice.
                let names: Vec<String> =
                    child.iter().filter(|(_, (_, c))| *c > 1).map(|(n, _)| n.clone()).collect();
                let times = if self.unit() < 1.0 / 3.0 { 2 } else { 1 };
                for _ in 0..times {
                    if names.is_empty() {
                        break;
                    }
                    let n = &names[self.below(names.len())];
                    let (i, c) = child[n];
                    let j = (i + 1 + self.below(c - 1)) % c;
                    child.insert(n.clone(), (j, c));
                }
                let seed = Some(self.next_u64());
                Some(Proposal { pinned: child.into_iter().map(|(n, (i, _))| (n, i)).collect(), seed })
            }
        }
    }

    /// Binary tournament: the cheaper of two measured points drawn at random.
    fn tournament(&mut self) -> usize {
        let (a, b) = (self.below(self.population.len()), self.below(self.population.len()));
        if self.population[a].1 <= self.population[b].1 { a } else { b }
    }

    /// What the evaluation of the last proposal asked for (every proposal is evaluated before
    /// the next is made).
    pub fn evaluated(&mut self, seen: &[Seen]) {
        if self.strategy == Strategy::Exhaustive {
            self.last = Some(seen.to_vec());
        }
    }

    /// A candidate's cost (seconds); `None` for a candidate that failed.
    pub fn measured(&mut self, seen: &[Seen], cost: Option<f64>) {
        if let Some(c) = cost
            && c.is_finite()
        {
            self.population.push((seen.to_vec(), c));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Params;

    /// A toy space: `a` in 0..3; when a == 1, also `b` in 0..2; always `c` in 0..2.
    fn eval(p: &Proposal) -> Vec<Seen> {
        let mut params = Params { pinned: p.pinned.clone(), seed: p.seed, ..Params::default() };
        let text = |i: usize| i.to_string();
        let a = params.pick("a", 3, &text).unwrap();
        if a == 1 {
            params.pick("b", 2, &text).unwrap();
        }
        params.pick("c", 2, &text).unwrap();
        params.seen
    }

    fn key(seen: &[Seen]) -> String {
        seen.iter().map(|s| format!("{}={}", s.name, s.value)).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn exhaustive_visits_every_point_of_a_conditional_space_once() {
        let mut s = Search::new(Strategy::Exhaustive, 0);
        let mut keys = Vec::new();
        while let Some(p) = s.propose() {
            let seen = eval(&p);
            s.evaluated(&seen);
            keys.push(key(&seen));
        }
        assert_eq!(
            keys,
            [
                "a=0 c=0",
                "a=0 c=1",
                "a=1 b=0 c=0",
                "a=1 b=0 c=1",
                "a=1 b=1 c=0",
                "a=1 b=1 c=1",
                "a=2 c=0",
                "a=2 c=1"
            ]
        );
    }

    #[test]
    fn searches_measure_the_first_choices_first() {
        for st in [Strategy::Random, Strategy::Evolutionary] {
            let mut s = Search::new(st, 7);
            assert_eq!(s.propose(), Some(Proposal::default()), "{st}");
            assert!(s.propose().is_some_and(|p| p.seed.is_some()), "{st}");
        }
    }

    #[test]
    fn random_and_evolutionary_are_deterministic_given_the_seed() {
        for strategy in [Strategy::Random, Strategy::Evolutionary] {
            let run = |seed| {
                let mut s = Search::new(strategy, seed);
                let mut keys = Vec::new();
                for _ in 0..30 {
                    let p = s.propose().unwrap();
                    let seen = eval(&p);
                    s.evaluated(&seen);
                    // Cost: prefer a=2, c=1.
                    let cost = seen
                        .iter()
                        .map(|x| if x.name == "a" { 2 - x.index } else { 1 - x.index.min(1) })
                        .sum::<usize>();
                    s.measured(&seen, Some(cost as f64));
                    keys.push(key(&seen));
                }
                keys
            };
            assert_eq!(run(7), run(7), "{strategy}");
            assert_ne!(run(7), run(8), "{strategy}");
            let keys = run(7);
            let mut distinct = keys.clone();
            distinct.sort();
            distinct.dedup();
            assert!(distinct.len() >= 6, "{strategy} explores: {distinct:?}");
        }
    }

    #[test]
    fn evolution_prefers_the_cheap_region() {
        let late_best = |strategy| {
            let mut s = Search::new(strategy, 3);
            let mut n = 0;
            for t in 0..200 {
                let p = s.propose().unwrap();
                let seen = eval(&p);
                let cost = seen
                    .iter()
                    .map(|x| if x.name == "a" { 2 - x.index } else { 1 - x.index.min(1) })
                    .sum::<usize>();
                s.measured(&seen, Some(cost as f64));
                if t >= 100 && cost == 0 {
                    n += 1;
                }
            }
            n
        };
        // Random search hits the best point (a=2, c=1) a sixth of the time.
        let (evo, random) = (late_best(Strategy::Evolutionary), late_best(Strategy::Random));
        assert!(evo > random, "evolutionary {evo}, random {random} of 100 late proposals at the best point");
    }
}
