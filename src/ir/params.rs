//! Tuning parameters, asked for where they are used (define-by-run, as Optuna's
//! `suggest_categorical`): a search space is a program whose `param(name, choices)` calls pick
//! one choice each. The tuner pins the choices of a candidate, or lets unpinned ones be drawn
//! from a seed; the program reports back every parameter it asked for. A parameter's choices
//! may depend on earlier ones (the legal permutations of a nest strip-mined by an earlier
//! choice), which is why a space is a program rather than a fixed grid.

use std::collections::BTreeMap;

/// One parameter as a run of the program met it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Seen {
    /// Its name.
    pub name: String,
    /// The choice taken (0-based).
    pub index: usize,
    /// How many choices there were.
    pub choices: usize,
    /// The choice taken, as text (`32`, `[1, 3, 2]`).
    pub value: String,
}

/// The parameters of one evaluation of a program: what to pick, and what was picked.
#[derive(Clone, Debug, Default)]
pub struct Params {
    /// Choices fixed by the tuner: an index into the choices (taken modulo their number).
    pub pinned: BTreeMap<String, usize>,
    /// Choices fixed by their text (a candidate replayed at another size, where the list of
    /// legal choices may differ): the choice whose text this is.
    pub values: BTreeMap<String, String>,
    /// Unpinned parameters take a choice drawn from this seed (else their first choice).
    pub seed: Option<u64>,
    /// Every parameter the program asked for, in the order it asked.
    pub seen: Vec<Seen>,
    /// Where the tuner hears what was asked even when the evaluation fails (the state with
    /// `seen` is then lost).
    pub report: Option<std::sync::Arc<std::sync::Mutex<Vec<Seen>>>>,
}

/// Parameters never make two states differ.
impl PartialEq for Params {
    fn eq(&self, _: &Params) -> bool {
        true
    }
}

impl Params {
    /// Fixed choices, nothing drawn.
    pub fn pinned(pinned: BTreeMap<String, usize>) -> Params {
        Params { pinned, ..Params::default() }
    }

    /// Which of `choices` choices parameter `name` takes (recorded in `seen`, with `value`
    /// giving each choice's text); a second call with the same name takes the same choice.
    /// An error when the choice pinned by its text is not among the choices.
    pub fn pick(
        &mut self,
        name: &str,
        choices: usize,
        value: &dyn Fn(usize) -> String,
    ) -> Result<usize, String> {
        if let Some(s) = self.seen.iter().find(|s| s.name == name && s.choices == choices) {
            return Ok(s.index);
        }
        let index = if let Some(v) = self.values.get(name) {
            (0..choices).find(|&i| value(i) == *v).ok_or_else(|| {
                let all: Vec<String> = (0..choices).map(value).collect();
                format!("the choice {v} of `{name}` is not among its choices here: {}", all.join(", "))
            })?
        } else {
            match (self.pinned.get(name), self.seed) {
                (Some(i), _) => i % choices,
                (None, Some(seed)) => (mix(seed ^ mix(hash(name))) % choices as u64) as usize,
                (None, None) => 0,
            }
        };
        let seen = Seen { name: name.to_string(), index, choices, value: value(index) };
        if let Some(r) = &self.report
            && let Ok(mut r) = r.lock()
        {
            r.push(seen.clone());
        }
        self.seen.push(seen);
        Ok(index)
    }

    /// The choices taken, by their text: pins that replay this evaluation at any size.
    pub fn values_taken(&self) -> BTreeMap<String, String> {
        self.seen.iter().map(|s| (s.name.clone(), s.value.clone())).collect()
    }

    /// The choices taken, by name.
    pub fn taken(&self) -> BTreeMap<String, usize> {
        self.seen.iter().map(|s| (s.name.clone(), s.index)).collect()
    }
}

/// A stable 64-bit hash of a string (FNV-1a): the same on every machine and every run.
pub fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// SplitMix64's finalizer: a well-mixed 64-bit value from any 64-bit value.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_drawn_and_default_choices() {
        let text = |i: usize| i.to_string();
        let mut p = Params::pinned([("a".to_string(), 7)].into_iter().collect());
        assert_eq!(p.pick("a", 3, &text), Ok(1));
        assert_eq!(p.pick("b", 3, &text), Ok(0));
        assert_eq!(p.pick("a", 3, &text), Ok(1), "asked again: the same choice");
        let mut v = Params {
            values: [("a".to_string(), "2".to_string())].into_iter().collect(),
            ..Params::default()
        };
        assert_eq!(v.pick("a", 3, &text), Ok(2));
        assert!(v.pick("a", 2, &text).unwrap_err().contains("not among"));
        assert_eq!(p.seen.len(), 2);
        let mut q = Params { seed: Some(5), ..Params::default() };
        let mut r = Params { seed: Some(5), ..Params::default() };
        assert_eq!(q.pick("x", 1000, &text), r.pick("x", 1000, &text), "deterministic");
    }
}
