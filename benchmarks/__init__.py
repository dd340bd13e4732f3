"""The comparison harness: the example apps run stock, hand-parallelised and through accel on
the same engines, data and query order (`accel bench <example>`)."""
