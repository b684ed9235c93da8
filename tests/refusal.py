"""The project's bad-input contract, checked on the CLI: exit 2 and one line on stderr."""

from fabroute.cli import main


def refusal(argv: list[str], capsys) -> str:
    """Run ``fabroute argv``; assert it refused (exit 2, argparse's too) in one line, which
    is returned."""
    try:
        code = main(argv)
    except SystemExit as e:          # argparse's refusal of an option's value
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err
