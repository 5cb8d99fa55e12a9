"""The baseline every experiment starts from: replace it with your own tests."""

import unittest


def add(a, b):
    return a + b


class TestBaseline(unittest.TestCase):
    def test_addition(self):
        self.assertEqual(add(2, 3), 5)

    def test_strings(self):
        self.assertEqual("sandbox".upper(), "SANDBOX")


if __name__ == "__main__":
    unittest.main()
