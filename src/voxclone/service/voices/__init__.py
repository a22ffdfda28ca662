"""The voice library: enrollment (its admission, checks and spoken consent),
the stored voice and its report, refinement and more recordings, inline
clones, saved blends, and the voice service that ties them together. Each
module is imported by its own name; nothing is re-exported here."""
