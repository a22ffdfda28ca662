"""The speech surface: a request routed to its engine's SpeechService, priced,
planned, rendered and encoded, and the speech jobs that render long texts in
the background. Each module is imported by its own name; nothing is re-exported
here."""
