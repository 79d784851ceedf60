//! The paths a stream can take to the upstream, and their one set of names
//! (what `--paths` takes, the tables print and the rounds log keeps).

/// A path a stream can take to the upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathKind {
    Direct,
    Tpscope,
    /// Another build of tpscope (`--baseline`), for the old/new ratio.
    Baseline,
    Nginx,
    Litellm,
}

impl PathKind {
    /// Every path, in the order their names are listed.
    pub const ALL: [PathKind; 5] = [
        PathKind::Direct,
        PathKind::Tpscope,
        PathKind::Baseline,
        PathKind::Nginx,
        PathKind::Litellm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PathKind::Direct => "direct",
            PathKind::Tpscope => "tpscope",
            PathKind::Baseline => "baseline",
            PathKind::Nginx => "nginx",
            PathKind::Litellm => "litellm",
        }
    }

    /// The path named `name`, if any.
    pub fn from_name(name: &str) -> Option<PathKind> {
        PathKind::ALL.into_iter().find(|p| p.name() == name)
    }
}
