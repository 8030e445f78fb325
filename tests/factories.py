import factory

from portal.accounts.models import User


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    first_name = "Test"
    last_name = factory.Faker("last_name")
    email = factory.LazyAttribute(lambda user: f"{user.username}@gpuportal.test")
    uid_number = factory.Sequence(lambda n: 20000 + n)
    gid_number = 10000
    home_directory = factory.LazyAttribute(lambda user: f"/home/{user.username}")
    ldap_groups = ["portal-users"]
